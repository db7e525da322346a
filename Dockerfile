# alertd: GPU-aware incident correlation for Alertmanager.
#
# Build (from the repository's top; .dockerignore keeps the context to what is copied below):
#   docker build -t alertd:0.1.0 .
# Run (the image's config reads its tokens from /run/secrets, deploy/docker/alertd.yml):
#   docker run -p 9095:9095 -v $PWD/secrets:/run/secrets:ro alertd:0.1.0
# A site's rules directory mounts at /etc/alertd/rules.d (adds to or overrides the shipped rules).
#
# The base is pinned to an exact Python patch release and Debian release; raise both on purpose.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY rules ./rules
COPY alertd ./alertd
# alertd/rules/shipped_rules links to ../../rules: the wheel holds the shipped rules as package data.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --home-dir /var/lib/alertd --create-home alertd \
 && mkdir -p /etc/alertd/rules.d
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY runbooks /usr/share/alertd/runbooks
COPY deploy/docker/alertd.yml /etc/alertd/alertd.yml
COPY examples/alertd.yml /usr/share/alertd/alertd.example.yml
USER alertd
WORKDIR /var/lib/alertd
EXPOSE 9095
# Asks the listener that the config names (its port, and https when it has a tls section). Serving with
# another config file? Mount it at /etc/alertd/alertd.yml, or the check reads the wrong one.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-m", "alertd.app.healthcheck", "--config", "/etc/alertd/alertd.yml"]
ENTRYPOINT ["alertd"]
CMD ["serve", "--config", "/etc/alertd/alertd.yml"]

# alertd: GPU-aware incident correlation for Alertmanager.
#
# Build (from the repository's top; .dockerignore keeps the context to what is copied below):
#   docker build -t alertd:0.1.0 .
# Run: docs/deploy.md ("Docker"): a volume for the SQLite store, the two tokens under /run/secrets
# (deploy/docker/alertd.yml reads them there). scripts/build-image.sh builds it with podman instead,
# on a base made from Debian's own packages.
# A site's rules directory mounts at /etc/alertd/rules.d (adds to or overrides the shipped rules).
#
# The base is pinned to an exact Python patch release and Debian release; raise both on purpose.
# Any base with python3 (3.11 or later) and its venv module serves.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# The dependencies first, in a layer of their own: a change to alertd's code does not fetch them again.
COPY pyproject.toml ./
RUN python3 -m venv /opt/alertd \
 && python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
print("\n".join(p["project"]["dependencies"] + p["build-system"]["requires"]))' > /tmp/requirements.txt \
 && /opt/alertd/bin/pip install --no-cache-dir --upgrade -r /tmp/requirements.txt
COPY README.md ./
COPY rules ./rules
COPY alertd ./alertd
# alertd/rules/shipped_rules links to ../../rules: the package holds the shipped rules as package data.
# The build tools go once alertd is in: the image runs it, it installs nothing.
RUN /opt/alertd/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
 && /opt/alertd/bin/pip uninstall --yes setuptools pip

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --home-dir /var/lib/alertd --create-home alertd \
 && mkdir -p /etc/alertd/rules.d
COPY --from=build /opt/alertd /opt/alertd
ENV PATH=/opt/alertd/bin:$PATH
COPY runbooks /usr/share/alertd/runbooks
COPY deploy/docker/alertd.yml /etc/alertd/alertd.yml
COPY examples/alertd.yml /usr/share/alertd/alertd.example.yml
USER alertd
WORKDIR /var/lib/alertd
# The SQLite store (data_dir in the image's config): mount a volume here, or `docker rm` loses it.
VOLUME /var/lib/alertd
EXPOSE 9095
# Asks the listener that the config names (its port, and https when it has a tls section). Serving with
# another config file? Mount it at /etc/alertd/alertd.yml, or the check reads the wrong one.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-m", "alertd.app.healthcheck", "--config", "/etc/alertd/alertd.yml"]
ENTRYPOINT ["alertd"]
CMD ["serve", "--config", "/etc/alertd/alertd.yml"]

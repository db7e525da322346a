# alertd: GPU-aware incident correlation for Alertmanager.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY alertd ./alertd
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/alertd --create-home alertd
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY rules /etc/alertd/rules
COPY runbooks /usr/share/alertd/runbooks
COPY deploy/docker/alertd.yml /etc/alertd/alertd.yml
COPY examples/alertd.yml /usr/share/alertd/alertd.example.yml
USER alertd
WORKDIR /var/lib/alertd
EXPOSE 9095
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9095/healthz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["alertd"]
# The default config reads its tokens from /run/secrets (deploy/docker/alertd.yml): no open API.
CMD ["serve", "--config", "/etc/alertd/alertd.yml"]

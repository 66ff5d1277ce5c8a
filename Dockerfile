# syntax=docker/dockerfile:1
#
# xrgw container image. Targets:
#   runtime (default)  the gateway: `xrgw run -c /etc/xrgw/config.yaml`
#   spark              runtime + a Java runtime and PySpark, for the Spark job image
#
#   docker build -t xrgw:0.1.0 .
#   docker build --target spark -t xrgw-spark:0.1.0 .
#   docker run --read-only --tmpfs /tmp -v "$PWD/config:/etc/xrgw:ro" -p 9464:9464 xrgw:0.1.0
#
# Rules (checked by tests/ship/test_ship_dockerfile.py, and the install steps of the build
# stage are run in a fresh virtualenv by tests/ship/test_ship_install.py):
#   - base images pinned to a release tag (never `latest`); pin by digest in CI with
#     --build-arg PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:...
#   - Python packages only from requirements.lock (`--require-hashes`) or `==` pins;
#     Debian packages pinned to a version
#   - runs as the non-root user 10001; writes nothing outside /tmp, so the root
#     filesystem can be read-only (Kubernetes: readOnlyRootFilesystem + an emptyDir /tmp)

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/xrgw
COPY requirements.lock ./
RUN /opt/xrgw/bin/pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY adapters ./adapters
RUN /opt/xrgw/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/xrgw/bin/pip install --no-cache-dir --no-deps /wheels/*.whl \
 && /opt/xrgw/bin/xrgw --help > /dev/null

# -------------------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="xrgw" \
      org.opencontainers.image.description="Definition-driven protocol gateway: MQTT, AMQP 1.0, Kafka, NATS and HTTP messages to CloudEvents and back, driven by xRegistry message definitions" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/example/xrgw" \
      org.opencontainers.image.documentation="https://github.com/example/xrgw/tree/main/docs" \
      org.opencontainers.image.vendor="xrgw maintainers"

RUN groupadd --system --gid 10001 xrgw \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
            --shell /usr/sbin/nologin xrgw

COPY --from=build /opt/xrgw /opt/xrgw
COPY config/examples /usr/share/xrgw/examples

# Nothing writes outside /tmp: no bytecode caches, HOME and TMPDIR in /tmp.
ENV PATH=/opt/xrgw/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    XRGW_HEALTHCHECK_URL=http://127.0.0.1:9464/healthz

WORKDIR /tmp
USER 10001:10001

# 9464: admin (/metrics, /healthz, /readyz); 8080: HTTP ingress, when a route has one.
EXPOSE 9464 8080

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['XRGW_HEALTHCHECK_URL'], timeout=3)"]

# The configuration is read from /etc/xrgw/config.yaml (mount a directory there: the
# config file and the xRegistry documents it names, relative paths resolve next to it).
ENTRYPOINT ["xrgw", "run"]
CMD ["-c", "/etc/xrgw/config.yaml"]

# ---------------------------------------------------------------------------- spark
# The Spark job image (dead-letter re-drive, batch conversion; see docs/spark.md):
# the same gateway package plus a Java runtime and PySpark.
FROM runtime AS spark
ARG JRE_VERSION=17.0.21.1+2-1~deb12u1
ARG PYSPARK_VERSION=4.3.0
USER root
# slim images lack the man directories the JRE's postinst links into
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends "openjdk-17-jre-headless=${JRE_VERSION}" \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/default-jre
RUN /opt/xrgw/bin/pip install --no-cache-dir "pyspark==${PYSPARK_VERSION}" "pyarrow==26.0.1" "pandas==3.1.1"
ENV JAVA_HOME=/usr/lib/jvm/default-jre \
    PYSPARK_PYTHON=/opt/xrgw/bin/python \
    SPARK_LOCAL_DIRS=/tmp
LABEL org.opencontainers.image.title="xrgw-spark" \
      org.opencontainers.image.description="xrgw with Java and PySpark for the Spark job"
USER 10001:10001
HEALTHCHECK NONE
ENTRYPOINT ["spark-submit"]
CMD ["--help"]

# syntax=docker/dockerfile:1
#
# xrgw container image. Targets:
#   runtime (default)  the gateway: `xrgw run -c /etc/xrgw/config.yaml`
#   spark              runtime + a Java runtime and PySpark, for the Spark job image
#
#   docker build -t ghcr.io/xrgw/xrgw:0.1.0 --build-arg REVISION="$(git rev-parse --short HEAD)" .
#   docker build --target spark -t ghcr.io/xrgw/xrgw-spark:0.1.0 .
#   docker run --read-only --tmpfs /tmp -v "$PWD/config:/etc/xrgw:ro" -p 9464:9464 \
#     ghcr.io/xrgw/xrgw:0.1.0
#
# Rules (checked by tests/ship/test_ship_dockerfile.py; the build stage's steps are run and
# the runtime's /opt/xrgw assembled in a directory by tests/ship/test_ship_install.py):
#   - the base image pinned by digest, its tag beside it (a tag can be pushed again, a
#     digest cannot); to move to a newer base, replace both (or pass
#     --build-arg PYTHON_IMAGE=python:<tag>@sha256:<digest>)
#   - Python packages only from hash-checked lock files (`--require-hashes`) or `==` pins;
#     Debian packages pinned to a version
#   - the runtime stage has no installer: no pip, setuptools or wheel, neither in
#     /opt/xrgw nor in the base image's Python
#   - an SBOM (CycloneDX JSON) of what /opt/xrgw holds, generated at build time, ships at
#     /usr/share/doc/xrgw/sbom.cdx.json
#   - runs as the non-root user 10001; writes nothing outside /tmp, so the root
#     filesystem can be read-only (Kubernetes: readOnlyRootFilesystem + an emptyDir /tmp)

# python:3.11.11-slim-bookworm
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5

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
# The gateway installs nothing at run time: the installers (which the lock brings as build
# dependencies of the wheel) leave its environment before it is copied.
RUN /opt/xrgw/bin/python -m pip uninstall --yes --quiet pip setuptools wheel \
 && /opt/xrgw/bin/xrgw --version
# The SBOM of exactly that environment, made by a tool in an environment of its own
# (hash-checked from requirements-sbom.lock) that stays in this stage.
COPY requirements-sbom.lock ./
RUN python -m venv /opt/sbom-tool \
 && /opt/sbom-tool/bin/pip install --no-cache-dir --require-hashes -r requirements-sbom.lock
RUN mkdir -p /sbom \
 && /opt/sbom-tool/bin/cyclonedx-py environment --pyproject pyproject.toml \
      --mc-type application --output-reproducible --output-format JSON \
      --output-file /sbom/sbom.cdx.json /opt/xrgw/bin/python

# -------------------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
# The source revision: OCI label, `xrgw --version` and the xrgw_build_info metric.
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="xrgw" \
      org.opencontainers.image.description="Definition-driven protocol gateway: MQTT, AMQP 1.0, Kafka, NATS and HTTP messages to CloudEvents and back, driven by xRegistry message definitions" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/xrgw/xrgw" \
      org.opencontainers.image.documentation="https://github.com/xrgw/xrgw/tree/main/docs" \
      org.opencontainers.image.vendor="xrgw maintainers"

# No installers in the runtime: the base image's own pip, setuptools and wheel go too
# (ensurepip's bundled copies included), so nothing can install into the image and no
# scanner reports them.
RUN groupadd --system --gid 10001 xrgw \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
            --shell /usr/sbin/nologin xrgw \
 && python -m pip uninstall --yes --quiet pip setuptools wheel \
 && rm -rf /usr/local/lib/python3*/ensurepip

COPY --from=build /opt/xrgw /opt/xrgw
COPY --from=build /sbom/sbom.cdx.json /usr/share/doc/xrgw/sbom.cdx.json
COPY config/examples /usr/share/xrgw/examples

# Nothing writes outside /tmp: no bytecode caches, HOME and TMPDIR in /tmp.
ENV PATH=/opt/xrgw/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    XRGW_REVISION=${REVISION} \
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

# ---------------------------------------------------------------------- spark-build
# PySpark for the Spark image goes into the same environment, here where an installer may
# be: pip comes back for this step (the base image's bundled copy) and leaves again, and
# the SBOM is made anew so that it lists PySpark too. PySpark (4.3.0), pyarrow and pandas
# (2.x: what pyproject's `spark` extra allows) and every dependency of theirs come from
# requirements-spark.lock, hash-checked like the gateway's own.
FROM build AS spark-build
COPY requirements-spark.lock ./
RUN /opt/xrgw/bin/python -m ensurepip \
 && /opt/xrgw/bin/pip install --no-cache-dir --require-hashes -r requirements-spark.lock \
 && /opt/xrgw/bin/python -m pip uninstall --yes --quiet pip setuptools wheel \
 && /opt/sbom-tool/bin/cyclonedx-py environment --pyproject pyproject.toml \
      --mc-type application --output-reproducible --output-format JSON \
      --output-file /sbom/sbom.cdx.json /opt/xrgw/bin/python

# ---------------------------------------------------------------------------- spark
# The Spark job image (dead-letter re-drive, batch conversion; see docs/spark.md):
# the same gateway package plus a Java runtime and PySpark.
FROM runtime AS spark
ARG JRE_VERSION=17.0.21.1+2-1~deb12u1
USER root
# slim images lack the man directories the JRE's postinst links into
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends "openjdk-17-jre-headless=${JRE_VERSION}" \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/default-jre
COPY --from=spark-build /opt/xrgw /opt/xrgw
COPY --from=spark-build /sbom/sbom.cdx.json /usr/share/doc/xrgw/sbom.cdx.json
ENV JAVA_HOME=/usr/lib/jvm/default-jre \
    PYSPARK_PYTHON=/opt/xrgw/bin/python \
    SPARK_LOCAL_DIRS=/tmp
LABEL org.opencontainers.image.title="xrgw-spark" \
      org.opencontainers.image.description="xrgw with Java and PySpark for the Spark job"
USER 10001:10001
HEALTHCHECK NONE
ENTRYPOINT ["spark-submit"]
CMD ["--help"]

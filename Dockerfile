# syntax=docker/dockerfile:1
# One image for every strata role; the command picks the role and its config file:
#   docker run strata:dev coordinator --config /etc/strata/coordinator.toml
#   docker run strata:dev broker      --config /etc/strata/broker.toml
#   docker run strata:dev historical  --config /etc/strata/historical.toml
# Build: docker build -t strata:dev .   (docker-compose.yml and k8s/ use the tag strata:dev)

# The web console's chart library (uPlot) from the npm registry, exactly as the lock file pins it:
# the same `npm ci` as scripts/bootstrap.sh (ensure_console_deps) runs for a checkout. A stage of
# its own, so Node and npm stay out of the image; only the installed files are copied below.
FROM node:22-bookworm-slim AS console-deps
WORKDIR /console
COPY services/router/console/package.json services/router/console/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Ingestion tasks run PySpark, which needs a Java 17 runtime.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

# A fixed non-root uid/gid, so Kubernetes securityContext (runAsUser/fsGroup 10001) and volume
# ownership line up with the image.
RUN groupadd --system --gid 10001 strata \
 && useradd --system --uid 10001 --gid strata --home-dir /var/lib/strata --no-create-home \
        --shell /usr/sbin/nologin strata \
 && mkdir -p /etc/strata /var/lib/strata/segment-cache \
 && chown -R strata:strata /var/lib/strata

# Only what the distribution needs (see .dockerignore); the source tree is removed after install.
WORKDIR /tmp/strata-src
COPY pyproject.toml README.md setup.py ./
COPY common ./common
COPY services ./services
# pyproject.toml's package-data takes the console's vendor files (uPlot) from here into the install.
COPY --from=console-deps /console/node_modules ./services/router/console/node_modules
# gcc builds the compiled nested JSON split (setup.py); it is removed again once built.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip install --no-cache-dir . \
 && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
 && cd / && rm -rf /tmp/strata-src

# Relative default paths in the node config (var/strata/...) land under the strata user's home.
WORKDIR /var/lib/strata
USER 10001:10001

# coordinator: HTTP 8081, gRPC 8091 | broker: gRPC 8082, HTTP 8092, Arrow Flight 8815
# historical: gRPC 8083, HTTP 8093
EXPOSE 8081 8091 8082 8092 8815 8083 8093 8888

ENTRYPOINT ["strata"]
CMD ["--help"]

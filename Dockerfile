# The tfhelm image: the `tfhelm` CLI and Helm 4, nothing else (training pods use their own
# TensorFlow images). The tf-cluster chart's in-cluster reaper runs it (`reaper.image`,
# default `tfhelm/tfhelm:<chart version>`):
#
#   docker build -t tfhelm/tfhelm:0.1.0 .
#
ARG GO_VERSION=1.26
ARG PYTHON_VERSION=3.12
# Keep in step with HELM_VERSION in mk/versions.mk.
ARG HELM_VERSION=v4.3.2

# Helm from its Go module, built the way `make helm` builds it.
FROM golang:${GO_VERSION} AS helm
ARG HELM_VERSION
RUN CGO_ENABLED=0 GOBIN=/out go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
      helm.sh/helm/v4/cmd/helm@${HELM_VERSION}

FROM python:${PYTHON_VERSION}-slim
COPY --from=helm /out/helm /usr/local/bin/helm
WORKDIR /opt/tfhelm
# The repository's layout (the package and the charts it ships).
COPY pyproject.toml ./
COPY tfhelm ./tfhelm
COPY charts ./charts
RUN pip install --no-cache-dir . && rm -rf build *.egg-info
# HOME on /tmp: the chart mounts an emptyDir there and keeps the root filesystem read-only
# (Helm writes its cache and config under HOME).
ENV TFHELM_CHARTS_DIR=/opt/tfhelm/charts HOME=/tmp PYTHONUNBUFFERED=1
# Numeric, so Pod Security "restricted" (runAsNonRoot) can check it.
USER 1000:1000
CMD ["tfhelm", "--help"]

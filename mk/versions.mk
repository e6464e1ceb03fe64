# Every pinned tool version, in one place.
HELM_VERSION       := v4.3.2
KUBERNETES_VERSION := v1.36.3
ETCD_VERSION       := v3.6.16
KWOK_VERSION       := v0.8.0
TENSORFLOW_VERSION := 2.21.0
HELM_DOCS_VERSION  := v1.14.2

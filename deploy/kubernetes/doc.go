// Package kubernetes has no code of its own. It holds the kustomizations
// of the limiter's Kubernetes manifests (base, overlays/redis,
// overlays/redis-managed) and the Envoy snippet beside them, and its tests
// check them without a cluster: every kustomization is rendered with
// kustomize's own library, every object is decoded strictly into its
// Kubernetes type, and the settings they give the limiter are checked
// against the binary built from this repository, which is also started
// with them.
package kubernetes

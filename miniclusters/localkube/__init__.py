"""A one-node Kubernetes on this machine, built from its Go modules (`make kube`) and run by `minicluster kube`.

The `kubernetes` backend and the operator never know this cluster from a cloud's: they get a kubeconfig. This
package owns the cluster's processes (etcd, the control plane, containerd, the kubelet, kube-proxy, CoreDNS), its
PKI, its configuration files and its teardown; docs/kubernetes.md says which release runs here and why.
"""

module github.com/metaroce/metaroce

go 1.26.0

require (
	github.com/asavie/xdp v0.3.3
	github.com/cilium/ebpf v0.22.0
	github.com/vishvananda/netlink v1.3.1
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)

require github.com/vishvananda/netns v0.0.5 // indirect

"""The Kubernetes side: the one client and the calls made through it, whom they are made as, how their errors read, the pace of pushes, leader election and the API server breaker."""

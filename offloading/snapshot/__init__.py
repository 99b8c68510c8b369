"""The observe side: the watcher engine and informer, the full refresh, the snapshot rows, drift, the
inventory of pods and events, NamespaceMaps and Liqo resources, and what the pages read of those (peer
resources, stuck pods, the Liqo version). The diagnosis and the live reflection report are offloading.insight."""

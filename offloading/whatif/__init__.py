"""What a change would do before it is made: the preview and dry-run, the impact of a bulk, the pods it moves, room on the peers, remote-name collisions, and whether it is destructive."""

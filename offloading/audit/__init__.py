"""The audit trail: the one constructor of audit rows, their seal, proving and pruning the trail, and its filters."""

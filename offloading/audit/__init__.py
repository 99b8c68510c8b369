"""The audit trail: the one constructor of audit rows (their seal is the model's: offloading.models.seal), and proving, anchoring and pruning the trail."""

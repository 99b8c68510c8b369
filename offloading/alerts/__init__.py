"""Notifications: which subjects are told to the outgoing webhook and when (rules), and their delivery."""

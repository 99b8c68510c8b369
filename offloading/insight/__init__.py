"""The read side the pages explain: the diagnosis of a namespace (its rules, their findings, and the rules
over Liqo's resources of issue 27) and the live reflection report.

Above whatif and the snapshot: the diagnosis reads the snapshot, and explains a selector that matches
nothing with the preview and a shared remote name with the collision check. Nothing below imports it."""

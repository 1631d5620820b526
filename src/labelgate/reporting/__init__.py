"""HTML reports of gate runs and of monitoring history."""

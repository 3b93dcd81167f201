"""Advanced indexing, gather/scatter, joins, sort and scan (to be completed)."""

"""The coordinator role: the segment registry (metadata store) and the duties that decide which
historical loads or drops which segment."""

"""The broker's pure logic: the view of served segments (timeline + replicas) and query planning."""

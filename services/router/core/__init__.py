"""The router's pure logic: which upstream serves a path, which headers pass, which requests are refused."""

"""What the tests share: builders of logs and records, real servers and witnesses, a test TSA,
independent reference implementations. Imported as `tests.kit.x`; the kits import each other
relatively and nothing from the test modules."""

"""Steps: samples joined to training steps, energy per op, the records and the report."""

"""How many steps a sweep configuration runs by default: apart from ``sweep`` so that the command line's parser
reads them without importing the sweep's machinery."""

#: Warm-up steps of a configuration (the paper's 3): recorded, left out of averages and totals.
WARMUP_STEPS = 3
#: The fewest measured steps (after warm-up) whose mean step time and energy mean something; fewer are a step's
#: noise (lstm at batch 32 once measured faster than at batch 8, one step each). The default measures these.
MEASURED_STEPS = 10

"""The stored format of a measured run, as one contract the writers and every reader share.

``names``: the name of every file and folder of a run, the dashboard's plugin name and summary tag.
``layout``: ``RunLayout``, where each file of a run lives (the one builder of a run's paths).
``channels``: ``channels.json``, its version and the upgrade of older ones.
``gaps``: the gap rule, how long a channel may go without a reading before it is a hole.
``schema``: what a report holds, versioned (``format_version``, ``kind``: a run's report, a combined
report, a sweep child's summary), checked and upgraded wherever one is read; a run summary and a sweep's row.
``reader``: the one reader of a run's files. ``writer``: atomic JSON, a report stamped with its version.
``finite_json``: JSON without NaN or infinity.
``summary``: the run summary tensor that lists a run in the dashboard.

The core (``tf_mobileperf.output``, ``steps``, ``session``, ``tools``) and the
dashboard (the TensorBoard plugin package) both import it; it imports neither,
nor TensorFlow, so the dashboard loads without them.
"""

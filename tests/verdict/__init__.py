"""The verdict (``doctor.verdict``) on whole bundles, and the recorded real-engine scenarios replayed."""

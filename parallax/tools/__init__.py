"""Commands on top of the stages: parallax-calibrate (calibrate), the job it launches (calibration_job) and the
probe that times the user's own step (workload_probe)."""

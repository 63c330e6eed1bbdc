"""Stage 4, the plan: every decision for a job, made once, as a frozen TF-free record (records) that round-trips
through JSON (plan_json): what goes where (placement), AUTO's choice (auto_plan, cost_model, plan_search,
calibration, step_load), and the planner that asks the rules (planning)."""

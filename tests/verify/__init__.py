"""The eval gate (doctor/verify): prompts, structural checks, teacher-forced scoring, decisions, and the verify command."""

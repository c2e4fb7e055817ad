"""The performance-regression suite's library: profiles, matrix, baselines, the gate."""

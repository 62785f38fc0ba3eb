"""segments package of Elanus."""

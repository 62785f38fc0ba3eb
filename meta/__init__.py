"""meta package of Elanus."""

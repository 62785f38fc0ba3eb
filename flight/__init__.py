"""flight package of Elanus."""

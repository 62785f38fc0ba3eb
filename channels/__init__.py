"""channels package of Elanus."""

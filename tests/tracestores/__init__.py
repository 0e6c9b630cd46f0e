"""The trace store records (doctor/tracestores/): each route against its recorded real answer."""

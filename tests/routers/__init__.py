"""The router records (doctor/routers): every record answers every question; the real router read end to end."""

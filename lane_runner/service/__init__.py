"""What every run of the daemon shares: services, recovery, the home lock, systemd
notify, status, metrics and logs."""

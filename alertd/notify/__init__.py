"""Route incidents to receivers and deliver through a durable outbox."""

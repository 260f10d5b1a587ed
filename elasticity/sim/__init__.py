"""The event-driven scheduling simulator: replays traces through the policies the live controllers call."""

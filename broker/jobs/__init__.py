"""Jobs as Flux knows them: ids, the life cycle, jobspecs and the on-disk journal."""

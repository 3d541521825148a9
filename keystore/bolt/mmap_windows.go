package bolt

// initialMmapSize: on Windows bbolt grows the file to the size of its
// map, so the map starts as small as the file.
const initialMmapSize = 0

// Removes the build output so files of renamed sources never linger in dist/.
const fs = require('node:fs');
const path = require('node:path');

fs.rmSync(path.join(__dirname, '..', 'dist'), { recursive: true, force: true });

// tsc emits only .js/.d.ts/.json: n8n reads node and credential icons from
// next to the compiled files, so the SVGs are copied into dist/ as well.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
for (const dir of ['nodes', 'credentials']) {
	copySvgs(path.join(root, dir), path.join(root, 'dist', dir));
}

function copySvgs(from, to) {
	if (!fs.existsSync(from)) return;
	for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
		const source = path.join(from, entry.name);
		if (entry.isDirectory()) {
			copySvgs(source, path.join(to, entry.name));
		} else if (entry.name.endsWith('.svg')) {
			fs.mkdirSync(to, { recursive: true });
			fs.copyFileSync(source, path.join(to, entry.name));
		}
	}
}

'use strict';
// n8n's verification gate, offline: @n8n/scan-community-package's own
// analyzePackage (the ESLint rules of @n8n/eslint-plugin-community-nodes and
// eslint-plugin-n8n-nodes-base) over what npm would publish and over the
// sources. Its CLI fetches a published package from the registry by name,
// which an unpublished package cannot offer; analyzePackage(dir) is the part
// of it that judges the code.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
let scanner;
let tmp;
let tarball;

before(async () => {
	scanner = await import('@n8n/scan-community-package/scanner/scanner.mjs');
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'n8n-guard-node-scan-'));
	const packed = JSON.parse(
		execFileSync('npm', ['pack', '--json', '--pack-destination', tmp], {
			cwd: root,
			encoding: 'utf8',
			shell: process.platform === 'win32',
		}),
	)[0];
	tarball = { dir: path.join(tmp, 'package'), files: packed.files.map((f) => f.path) };
	fs.mkdirSync(tarball.dir);
	execFileSync('tar', ['-xzf', path.join(tmp, packed.filename), '-C', tarball.dir, '--strip-components=1']);
});

after(() => {
	if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function assertPassed(result) {
	assert.equal(result.passed, true, `${result.message ?? ''}\n${result.details ?? ''}`);
}

test('the packed tarball passes the scan, every file of it (.js, .ts, .json)', async () => {
	assert.ok(tarball.files.includes('dist/nodes/N8nGuard/N8nGuard.node.js'), tarball.files.join('\n'));
	// With its default patterns: stricter than the registry scan, which lints
	// only the tarball's .js and package.json.
	assertPassed(await scanner.analyzePackage(tarball.dir));
});

test('the sources pass the scan, as the registry scan lints an attested checkout', async () => {
	assertPassed(await scanner.analyzePackage(root, scanner.SOURCE_FILE_PATTERNS));
});

test('the scan has no warnings either, on the sources or the tarball', async () => {
	// analyzePackage passes with warnings and does not report them (a single
	// icon instead of a light/dark pair is one), so lint with its config here.
	const { ESLint } = require('eslint');
	const config = await scanner.buildScanConfig();
	for (const [dir, patterns] of [
		[root, scanner.SOURCE_FILE_PATTERNS],
		[tarball.dir, ['**/*.js', '**/*.ts', '**/*.json']],
	]) {
		const eslint = new ESLint({
			cwd: dir,
			allowInlineConfig: false,
			overrideConfigFile: true,
			overrideConfig: config,
			errorOnUnmatchedPattern: false,
		});
		const results = await eslint.lintFiles(patterns);
		const messages = results.flatMap((r) => r.messages.map((m) => `${path.relative(dir, r.filePath)}: ${m.ruleId}: ${m.message}`));
		assert.deepEqual(messages, [], dir);
		assert.ok(results.length >= 3, `linted only ${results.length} files in ${dir}`);
	}
});

test('the tarball ships the node, its credential and both icons, and nothing n8n does not load', () => {
	const shipped = tarball.files.filter((f) => !f.endsWith('.map')).sort();
	assert.deepEqual(shipped, [
		'README.md',
		'dist/credentials/N8nGuardApi.credentials.js',
		'dist/icons/n8nGuard.dark.svg',
		'dist/icons/n8nGuard.svg',
		'dist/nodes/N8nGuard/N8nGuard.node.js',
		'dist/nodes/N8nGuard/N8nGuard.node.json',
		'dist/nodes/N8nGuard/classify.js',
		'dist/nodes/N8nGuard/description.js',
		'dist/nodes/N8nGuard/operations.js',
		'dist/nodes/N8nGuard/transport.js',
		'dist/package.json',
		'package.json',
	]);
});

test('no runtime dependencies: n8n lends the node its own n8n-workflow', () => {
	const pkg = JSON.parse(fs.readFileSync(path.join(tarball.dir, 'package.json'), 'utf8'));
	assert.equal(pkg.dependencies, undefined);
	assert.deepEqual(pkg.peerDependencies, { 'n8n-workflow': '*' });
	for (const file of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
		assert.ok(fs.existsSync(path.join(tarball.dir, file)), `package.json names ${file}, the tarball lacks it`);
	}
});

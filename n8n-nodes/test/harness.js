'use strict';
// Test harness: a real n8n-guard server, and a small workflow runner that
// drives the compiled node's execute() the way n8n does.
//
// Real parts: the n8n-guard binary (built from ../cmd/n8n-guard, or
// N8N_GUARD_BIN), HTTP over loopback with axios (the client n8n-core uses),
// and n8n-workflow itself for default parameters, expressions ($json,
// $execution, $credentials), the node's output list and paired items ($()).
// Simulated: only the glue of n8n-core (IExecuteFunctions), kept to what the
// node calls.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const Module = require('node:module');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');

// Which n8n-workflow the node runs with: the top-level one (what n8n 2.41.1
// bundles) or, with N8N_WORKFLOW_PACKAGE=n8n-workflow-1, the copy of n8n
// 1.113.3. The node's own require('n8n-workflow') is pointed at the same copy,
// as n8n lends a community node its own.
const workflowPackage = process.env.N8N_WORKFLOW_PACKAGE || 'n8n-workflow';
if (workflowPackage !== 'n8n-workflow') {
	const target = require.resolve(workflowPackage);
	const resolveFilename = Module._resolveFilename;
	Module._resolveFilename = function (request, ...rest) {
		return request === 'n8n-workflow' ? target : resolveFilename.call(this, request, ...rest);
	};
}
const n8nWorkflowVersion = require(path.join(path.dirname(require.resolve(`${workflowPackage}/package.json`)), 'package.json')).version;

const axios = require('axios');
const { NodeApiError, NodeHelpers, Workflow, WorkflowDataProxy } = require('n8n-workflow');

const dist = path.join(__dirname, '..', 'dist');
if (!fs.existsSync(path.join(dist, 'nodes', 'N8nGuard', 'N8nGuard.node.js'))) {
	throw new Error('dist/ is missing: run `npm run build` first (npm test does).');
}
const { N8nGuard } = require(path.join(dist, 'nodes', 'N8nGuard', 'N8nGuard.node.js'));
const { N8nGuardApi } = require(path.join(dist, 'credentials', 'N8nGuardApi.credentials.js'));

// The node must run with the n8n-workflow under test, not another copy.
{
	const expected = path.dirname(require.resolve(`${workflowPackage}/package.json`));
	const loaded = Object.keys(require.cache).filter((f) => f.includes(`${path.sep}n8n-workflow`));
	const stray = loaded.filter((f) => !f.startsWith(expected + path.sep));
	if (stray.length > 0) throw new Error(`the node loaded another n8n-workflow than ${expected}: ${stray[0]}`);
}

const GUARD_TYPE = 'CUSTOM.n8nGuard';
// Where n8n's Wait nodes are woken ($execution.resumeUrl's base).
const RESUME_BASE = 'http://n8n.test:5678/webhook-waiting';
// n8n offers a node with usableAsTool to AI agents under its name plus "Tool".
const GUARD_TOOL_TYPE = `${GUARD_TYPE}Tool`;
const isGuard = (type) => type === GUARD_TYPE || type === GUARD_TOOL_TYPE;
const guardNode = new N8nGuard();
const guardCredential = new N8nGuardApi();

// ---------------------------------------------------------------------------
// The n8n-guard server

/**
 * Starts n8n-guard; `config` is the text of its YAML configuration file (--config),
 * `resumeOrigins` more n8n origins (besides RESUME_BASE's) whose resume URLs it accepts.
 */
async function startGuard({ config, resumeOrigins = [] } = {}) {
	const token = `test-${crypto.randomBytes(12).toString('hex')}`;
	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'n8n-guard-node-test-'));
	const bin = process.env.N8N_GUARD_BIN || buildGuard(tmp);
	const port = await freePort();
	const baseUrl = `http://127.0.0.1:${port}`;
	const args = ['serve', '--addr', `127.0.0.1:${port}`, '--data', path.join(tmp, 'data')];
	if (config !== undefined) {
		fs.writeFileSync(path.join(tmp, 'config.yaml'), config);
		args.push('--config', path.join(tmp, 'config.yaml'));
	}
	const child = spawn(bin, args, {
		// Resume URLs point at RESUME_BASE's n8n: the guard accepts them only for a configured n8n.
		env: { ...process.env, N8N_GUARD_TOKENS: token, N8N_GUARD_RESUME_ORIGINS: [new URL(RESUME_BASE).origin, ...resumeOrigins].join(',') },
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	let log = '';
	child.stdout.on('data', (c) => (log += c));
	child.stderr.on('data', (c) => (log += c));
	let exited = null;
	child.on('exit', (code, signal) => (exited = { code, signal }));

	const deadline = Date.now() + 20000;
	for (;;) {
		if (exited) {
			throw new Error(`n8n-guard exited (${JSON.stringify(exited)}) before it was ready:\n${log}`);
		}
		try {
			const res = await axios.get(`${baseUrl}/healthz`, { timeout: 1000, validateStatus: () => true });
			if (res.status === 200) break;
		} catch {
			// not listening yet
		}
		if (Date.now() > deadline) {
			child.kill('SIGKILL');
			throw new Error(`n8n-guard did not answer /healthz within 20 s:\n${log}`);
		}
		await new Promise((r) => setTimeout(r, 100));
	}

	return {
		baseUrl,
		token,
		kind: `n8n-guard binary ${bin}`,
		log: () => log,
		async stop() {
			if (!exited) {
				const gone = new Promise((r) => child.once('exit', r));
				child.kill('SIGTERM');
				const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
				await gone;
				clearTimeout(timer);
			}
			fs.rmSync(tmp, { recursive: true, force: true });
		},
	};
}

function buildGuard(tmp) {
	const repo = path.resolve(__dirname, '..', '..');
	const pkg = path.join(repo, 'cmd', 'n8n-guard');
	if (!fs.existsSync(pkg) || !fs.readdirSync(pkg).some((f) => f.endsWith('.go'))) {
		throw new Error(
			`cannot build n8n-guard: ${pkg} has no Go files. Set N8N_GUARD_BIN to a built binary.`,
		);
	}
	const bin = path.join(tmp, 'n8n-guard');
	execFileSync('go', ['build', '-o', bin, './cmd/n8n-guard'], { cwd: repo, stdio: ['ignore', 'inherit', 'inherit'] });
	return bin;
}

function freePort() {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.unref();
		srv.on('error', reject);
		srv.listen(0, '127.0.0.1', () => {
			const { port } = srv.address();
			srv.close(() => resolve(port));
		});
	});
}

// ---------------------------------------------------------------------------
// n8n's request helpers, as n8n-core implements them, over real HTTP

// Every request the node sent, in order: { method, url, body }.
const sent = [];

/** n8n-core's httpRequest: IHttpRequestOptions -> axios. */
async function httpRequest(options) {
	sent.push({ method: options.method || 'GET', url: options.url, body: options.body });
	const config = {
		method: options.method || 'GET',
		url: options.url,
		baseURL: options.baseURL,
		headers: { 'User-Agent': 'n8n', ...(options.headers || {}) },
		params: options.qs,
		timeout: options.timeout,
		maxRedirects: 0,
	};
	const body = options.body;
	if (body !== undefined && config.method.toUpperCase() !== 'GET') {
		if (typeof body === 'string' || (typeof body === 'object' && Object.keys(body).length > 0)) {
			config.data = body;
		}
	}
	if (options.json) config.headers.Accept = 'application/json';
	if (options.ignoreHttpStatusErrors) config.validateStatus = () => true;
	const res = await axios(config);
	if (options.returnFullResponse) {
		return { body: res.data, headers: res.headers, statusCode: res.status, statusMessage: res.statusText };
	}
	return res.data;
}

/** n8n's CredentialsHelper.authenticate for a generic credential. */
function authenticate(workflow, node, credentials, options) {
	const resolve = (value) =>
		workflow.expression.getParameterValue(value, null, 0, 0, node.name, [], 'internal', { $credentials: credentials });
	const props = guardCredential.authenticate.properties;
	const headers = { ...(options.headers || {}) };
	for (const [name, value] of Object.entries(props.headers || {})) headers[name] = resolve(value);
	return { ...options, headers };
}

/** n8n's credential test: the credential's `test.request`, authenticated. */
async function testCredential(credentials) {
	const node = { id: 't', name: 'Credential test', type: GUARD_TYPE, typeVersion: 1, position: [0, 0], parameters: {} };
	const workflow = new Workflow({ nodes: [node], connections: {}, active: false, nodeTypes: nodeTypes() });
	const resolve = (value) =>
		workflow.expression.getParameterValue(value, null, 0, 0, node.name, [], 'internal', { $credentials: credentials });
	const request = { ...guardCredential.test.request };
	request.baseURL = resolve(request.baseURL);
	const signed = authenticate(workflow, node, credentials, request);
	return await httpRequest({ ...signed, json: true, returnFullResponse: true, ignoreHttpStatusErrors: true });
}

// ---------------------------------------------------------------------------
// A small workflow runner

const passThrough = {
	description: {
		displayName: 'Test node',
		name: 'testNode',
		group: ['transform'],
		version: 1,
		description: '',
		defaults: { name: 'Test node' },
		inputs: ['main'],
		outputs: ['main'],
		properties: [],
	},
};

function nodeTypes() {
	const byType = (type) => (isGuard(type) ? guardNode : passThrough);
	return {
		getByName: byType,
		getByNameAndVersion: byType,
		getKnownTypes: () => ({}),
	};
}

/**
 * Builds a workflow from a compact definition:
 *   nodes: { Name: { guard: {parameters}, tool? } | { fn: async (items) => items } , onError? }
 *   (tool: the node as n8n runs it for an AI agent, type CUSTOM.n8nGuardTool)
 *   connections: [['From', outputIndex, 'To'], ...]
 */
function defineWorkflow({ nodes, connections = [] }) {
	const list = Object.entries(nodes).map(([name, def], i) => ({
		id: String(i + 1),
		name,
		type: def.guard ? (def.tool ? GUARD_TOOL_TYPE : GUARD_TYPE) : 'test.fn',
		typeVersion: 1,
		position: [i * 200, 0],
		parameters: def.guard || {},
		...(def.onError ? { onError: def.onError } : {}),
	}));
	const conns = {};
	for (const [from, output, to] of connections) {
		const main = (conns[from] ??= { main: [] }).main;
		while (main.length <= output) main.push([]);
		main[output].push({ node: to, type: 'main', index: 0 });
	}
	return { list, conns, fns: Object.fromEntries(Object.entries(nodes).map(([n, d]) => [n, d.fn])) };
}

/**
 * Runs one execution of a defined workflow, starting at `start` with `items`
 * (plain json objects). Returns { runData, outputs(name) }.
 */
// Execution ids must never repeat within a run: the node sends them to the
// guard as part of request_id, which tells a repeat from a copy.
let executions = 0;

async function runWorkflow(definition, { start, items, credentials, executionId = `${process.pid}-${++executions}` }) {
	const workflow = new Workflow({
		id: 'wf-test',
		name: 'n8n-guard node test',
		nodes: definition.list.map((n) => ({ ...n, parameters: { ...n.parameters } })),
		connections: definition.conns,
		active: false,
		nodeTypes: nodeTypes(),
	});
	const runExecutionData = { resultData: { runData: {} } };
	// n8n's resume URL: <webhook-waiting base>/<execution id>.
	const additionalKeys = { $execution: { id: executionId, mode: 'test', resumeUrl: `${RESUME_BASE}/${executionId}` } };

	const queue = [
		{
			name: start,
			items: items.map((json) => ({ json })),
			source: null,
		},
	];
	while (queue.length > 0) {
		const { name, items: input, source } = queue.shift();
		const node = workflow.getNode(name);
		const executeData = { node, data: { main: [input] }, source: source ? { main: [source] } : null };
		let outputs;
		if (isGuard(node.type)) {
			const ctx = executeContext({ workflow, node, input, executeData, runExecutionData, additionalKeys, credentials });
			outputs = await guardNode.execute.call(ctx);
		} else {
			const produced = definition.fns[name] ? await definition.fns[name](input) : input;
			outputs = [produced.map((item, i) => ({ pairedItem: { item: i }, ...item }))];
		}
		runExecutionData.resultData.runData[name] = [
			{ startTime: Date.now(), executionTime: 0, executionStatus: 'success', source: source ? [source] : [], data: { main: outputs } },
		];
		const targets = workflow.connectionsBySourceNode[name]?.main ?? [];
		targets.forEach((conns, outputIndex) => {
			const out = outputs[outputIndex] ?? [];
			if (out.length === 0) return;
			for (const c of conns ?? []) {
				queue.push({ name: c.node, items: out, source: { previousNode: name, previousNodeOutput: outputIndex, previousNodeRun: 0 } });
			}
		});
	}

	const runData = runExecutionData.resultData.runData;
	return {
		runData,
		/** The items a node produced on one output (json only). */
		output: (name, index = 0) => (runData[name]?.[0]?.data.main[index] ?? []).map((i) => i.json),
		ran: (name) => runData[name] !== undefined,
	};
}

/** The part of n8n-core's ExecuteContext that the node uses. */
function executeContext({ workflow, node, input, executeData, runExecutionData, additionalKeys, credentials }) {
	const resolve = (value, itemIndex) =>
		workflow.expression.getParameterValue(value, runExecutionData, 0, itemIndex, node.name, input, 'manual', additionalKeys, executeData);
	const ctx = {
		logger: { debug() {}, info() {}, warn() {}, error() {} },
		getInputData: () => input,
		getNode: () => node,
		getMode: () => 'manual',
		getExecutionId: () => additionalKeys.$execution.id,
		getExecutionCancelSignal: () => undefined,
		continueOnFail: () => node.onError === 'continueRegularOutput' || node.onError === 'continueErrorOutput',
		getNodeParameter(name, itemIndex, fallback) {
			const value = node.parameters[name];
			if (value === undefined) {
				if (arguments.length >= 3) return fallback;
				throw new Error(`Could not get parameter "${name}"`);
			}
			return resolve(value, itemIndex);
		},
		async getCredentials(type) {
			if (type !== guardCredential.name) throw new Error(`unexpected credential type ${type}`);
			return { ...credentials };
		},
		getParentNodes(name) {
			return workflow.getParentNodes(name).map((parent) => {
				const n = workflow.getNode(parent);
				return { name: n.name, type: n.type, typeVersion: n.typeVersion, disabled: n.disabled === true };
			});
		},
		getWorkflowDataProxy(itemIndex) {
			return new WorkflowDataProxy(
				workflow,
				runExecutionData,
				0,
				itemIndex,
				node.name,
				input,
				{},
				'manual',
				additionalKeys,
				executeData,
			).getDataProxy();
		},
		helpers: {
			async httpRequestWithAuthentication(type, options) {
				try {
					if (type !== guardCredential.name) throw new Error(`unexpected credential type ${type}`);
					return await httpRequest(authenticate(workflow, node, credentials, options));
				} catch (error) {
					throw new NodeApiError(node, error);
				}
			},
		},
	};
	return ctx;
}

/** The outputs n8n shows for a guard node with these parameters. */
function guardOutputs(parameters) {
	const node = { id: '1', name: 'Guard', type: GUARD_TYPE, typeVersion: 1, position: [0, 0], parameters };
	const workflow = new Workflow({ nodes: [node], connections: {}, active: false, nodeTypes: nodeTypes() });
	return NodeHelpers.getNodeOutputs(workflow, workflow.getNode('Guard'), guardNode.description);
}

module.exports = { RESUME_BASE, n8nWorkflowVersion, sent, startGuard, defineWorkflow, runWorkflow, testCredential, guardOutputs, guardNode };

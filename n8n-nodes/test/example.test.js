'use strict';
// examples/guarded-crm-write.json as users import it: importable on n8n 2.x,
// nothing read from $env, the guard reached through the credential, and its
// n8n-guard nodes doing their job with exactly the parameters it ships.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { startGuard, defineWorkflow, runWorkflow, guardNode } = require('./harness');

const examples = path.join(__dirname, '..', 'examples');
const example = JSON.parse(fs.readFileSync(path.join(examples, 'guarded-crm-write.json'), 'utf8'));
const [credential] = JSON.parse(fs.readFileSync(path.join(examples, 'n8n-guard-credential.json'), 'utf8'));
const guardNodes = example.nodes.filter((n) => n.type === 'CUSTOM.n8nGuard');
const node = (name) => example.nodes.find((n) => n.name === name);

let guard;
before(async () => {
	guard = await startGuard();
});
after(async () => {
	await guard?.stop();
});

test('it has the id n8n 2.x needs to import it, and reads nothing from $env', () => {
	assert.equal(typeof example.id, 'string');
	assert.ok(example.id.length > 0);
	assert.equal(JSON.stringify(example).includes('$env'), false, 'n8n 2.x blocks $env in expressions by default');
	assert.equal(example.settings.executionOrder, 'v1');
	for (const n of example.nodes.filter((x) => x.type === 'n8n-nodes-base.webhook')) {
		assert.ok(n.webhookId, `${n.name} needs a webhookId for the path /webhook/<path>`);
	}
});

test('every n8n-guard node uses the credential the credential file creates', () => {
	assert.equal(guardNodes.length, 3);
	assert.equal(credential.type, 'n8nGuardApi');
	assert.deepEqual(Object.keys(credential.data).sort(), ['baseUrl', 'token']);
	for (const n of guardNodes) {
		assert.deepEqual(n.credentials, { n8nGuardApi: { id: credential.id, name: credential.name } }, n.name);
	}
});

test('its n8n-guard nodes set only parameters the node has', () => {
	const known = new Set(guardNode.description.properties.map((p) => p.name));
	for (const n of guardNodes) {
		for (const name of Object.keys(n.parameters)) assert.ok(known.has(name), `${n.name}: unknown parameter ${name}`);
	}
});

test('run as shipped: one contact for an event sent twice, the copy leaves by Already done', async () => {
	const credentials = { baseUrl: guard.baseUrl, token: guard.token };
	const created = [];
	const connections = [];
	for (const [from, { main }] of Object.entries(example.connections)) {
		main.forEach((targets, output) => targets.forEach((t) => connections.push([from, output, t.node])));
	}
	const w = defineWorkflow({
		nodes: {
			Webhook: {},
			Reserve: { guard: node('Reserve').parameters },
			// The CRM answers like the example expects: the new contact's id.
			'Create contact': {
				fn: async (items) => items.map(() => ({ json: { id: `crm-${created.push(1)}` } })),
			},
			Complete: { guard: node('Complete').parameters },
			Fail: { guard: node('Fail').parameters },
			'Already done': {},
			Blocked: {},
		},
		connections,
	});
	const lead = { body: { event_id: 'evt-example-1', email: 'ada@example.org' } };
	const first = await runWorkflow(w, { start: 'Webhook', items: [lead], credentials, executionId: '1' });
	assert.deepEqual(first.output('Complete').map((a) => [a.outcome, a.result_ref]), [['completed', 'crm-1']]);
	const again = await runWorkflow(w, { start: 'Webhook', items: [lead], credentials, executionId: '2' });
	assert.equal(created.length, 1);
	assert.deepEqual(again.output('Already done').map((a) => [a.outcome, a.result_ref]), [['duplicate_event', 'crm-1']]);
	assert.equal(again.ran('Create contact'), false);
});

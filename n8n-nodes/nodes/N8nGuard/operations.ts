import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError, sleep } from 'n8n-workflow';

import { classifyError, type FailReason } from './classify';
import type { Operation } from './description';
import { guardRequest, isObject } from './transport';

// How often a reserve that met in_progress asks again while it may wait.
const IN_PROGRESS_POLL_MS = 500;

// The guard's limit for request_id (keystore.Request's max=128).
const REQUEST_ID_MAX = 128;

/**
 * The outputs of the Reserve operation, in the order of the node's outputs.
 * Parked is there only when the node parks (the Resume URL option is set).
 */
export const enum ReserveOutput {
	Proceed = 0,
	AlreadyDone = 1,
	Blocked = 2,
	Parked = 3,
}

/**
 * Where a reserve answer leaves the node. Only an answer that says
 * `proceed: true` may lead to the side effect; everything unknown is Blocked.
 * A parked event — the destination is paused, or the event waits for a
 * person's approval (`awaiting_approval`) — leaves by Parked (to the Wait
 * node), or by Blocked when the node has no Parked output. A rejected
 * approval answers `rejected` (its reason in `message`) and is Blocked, like
 * any rejected key: the workflow ends there without a write.
 */
export function reserveOutput(answer: IDataObject, parking: boolean): ReserveOutput {
	if (answer.proceed === true) return ReserveOutput.Proceed;
	if (answer.outcome === 'duplicate_event') return ReserveOutput.AlreadyDone;
	if (answer.outcome === 'parked' && parking) return ReserveOutput.Parked;
	return ReserveOutput.Blocked;
}

type Run = (this: IExecuteFunctions, itemIndex: number, item: INodeExecutionData) => Promise<IDataObject>;

export const operations: Record<Operation, Run> = {
	async reserve(itemIndex) {
		const options = this.getNodeParameter('reserveOptions', itemIndex, {}) as IDataObject;
		const body: IDataObject = {
			namespace: identity.call(this, 'namespace', itemIndex),
			key: identity.call(this, 'key', itemIndex),
		};
		const owner = text(this.getNodeParameter('owner', itemIndex, ''));
		if (owner !== '') body.owner = owner;
		const requestId = reserveRequestId.call(this, itemIndex);
		if (requestId !== '') body.request_id = requestId;
		if (options.leaseSeconds !== undefined) body.lease_seconds = Math.round(Number(options.leaseSeconds));
		if (options.payload !== undefined) {
			body.payload = parseJson.call(this, options.payload, 'Payload', itemIndex) as IDataObject;
		}
		if (text(options.fingerprint) !== '') body.fingerprint = text(options.fingerprint);
		if (text(options.destination) !== '') body.destination = text(options.destination);
		if (text(options.resumeUrl).trim() !== '') body.resume_url = text(options.resumeUrl).trim();
		if (text(options.requestedBy).trim() !== '') body.requested_by = text(options.requestedBy).trim();
		const summary = oneLine(text(options.summary), MAX_SUMMARY_CHARS);
		if (summary !== '') body.summary = summary;
		const waitMs = Math.max(0, Number(this.getNodeParameter('waitInProgress', itemIndex, 0))) * 1000;
		const deadline = Date.now() + waitMs;
		for (;;) {
			const answer = await guardRequest.call(this, itemIndex, 'POST', '/v1/reserve', { body });
			const left = deadline - Date.now();
			if (answer.outcome !== 'in_progress' || left <= 0 || this.getExecutionCancelSignal()?.aborted) {
				return answer;
			}
			await sleep(Math.min(IN_PROGRESS_POLL_MS, left));
		}
	},

	async complete(itemIndex, item) {
		const body = reservationOf.call(this, itemIndex, item);
		const options = this.getNodeParameter('completeOptions', itemIndex, {}) as IDataObject;
		const resultRef = text(this.getNodeParameter('resultRef', itemIndex, ''));
		if (resultRef !== '') body.result_ref = resultRef;
		if (options.result !== undefined) {
			const result = parseJson.call(this, options.result, 'Result', itemIndex);
			if (!isObject(result)) {
				throw new NodeOperationError(this.getNode(), 'Result must be a JSON object', { itemIndex });
			}
			body.result = result;
		}
		if (options.via !== undefined) body.via = options.via;
		return await guardRequest.call(this, itemIndex, 'POST', '/v1/complete', { body });
	},

	async fail(itemIndex, item) {
		const body = reservationOf.call(this, itemIndex, item);
		const reason = this.getNodeParameter('reason', itemIndex) as FailReason | 'auto';
		let message = text(this.getNodeParameter('message', itemIndex, ''));
		if (reason === 'auto') {
			const classified = classifyError(item.json);
			body.reason = classified.reason;
			if (message === '') message = classified.message;
		} else {
			body.reason = reason;
			if (reason === 'destination_failed') {
				body.retryable = this.getNodeParameter('retryable', itemIndex, true) as boolean;
			}
		}
		if (message !== '') body.message = message.slice(0, 2000);
		return await guardRequest.call(this, itemIndex, 'POST', '/v1/fail', { body });
	},

	async lookup(itemIndex) {
		const qs = {
			namespace: identity.call(this, 'namespace', itemIndex),
			key: identity.call(this, 'key', itemIndex),
		};
		return await guardRequest.call(this, itemIndex, 'GET', '/v1/lookup', { qs });
	},

	async resolve(itemIndex) {
		const options = this.getNodeParameter('resolveOptions', itemIndex, {}) as IDataObject;
		const body: IDataObject = {
			namespace: identity.call(this, 'namespace', itemIndex),
			key: identity.call(this, 'key', itemIndex),
			resolution: this.getNodeParameter('resolution', itemIndex) as string,
			by: text(this.getNodeParameter('by', itemIndex)),
			note: text(this.getNodeParameter('note', itemIndex)),
		};
		if (text(options.resultRef) !== '') body.result_ref = text(options.resultRef);
		if (options.force === true) body.force = true;
		return await guardRequest.call(this, itemIndex, 'POST', '/v1/resolve', { body });
	},
};

/**
 * The identity of this reserve attempt: n8n's execution id and the node's
 * name, plus the node's run and the item, so that only a repeat of the same
 * request (n8n's Retry On Fail re-running the node, a resent request after a
 * lost answer) is answered as a repeat — never a second item with the same key
 * in one execution, nor the same key met again in a later loop round. Without
 * an execution id there is nothing that tells attempts apart, so none is sent.
 */
export function reserveRequestId(this: IExecuteFunctions, itemIndex: number): string {
	const executionId = text(this.getExecutionId());
	if (executionId === '') return '';
	const runIndex = Number(this.getWorkflowDataProxy(itemIndex).$runIndex) || 0;
	const name = this.getNode().name;
	const fixed = `${executionId}::${runIndex}:${itemIndex}`;
	const room = REQUEST_ID_MAX - fixed.length;
	// A long node name is cut and marked with a hash of the whole name, so
	// two long names that share a beginning still differ.
	const label = name.length <= room ? name : `${name.slice(0, Math.max(0, room - 9))}~${fnv1a(name)}`;
	return `${executionId}:${label}:${runIndex}:${itemIndex}`.slice(0, REQUEST_ID_MAX);
}

/** 32-bit FNV-1a as 8 hex digits: a short, stable tag, not a secret. */
function fnv1a(value: string): string {
	let hash = 0x811c9dc5;
	for (let i = 0; i < value.length; i++) {
		hash ^= value.charCodeAt(i);
		hash = Math.imul(hash, 0x01000193) >>> 0;
	}
	return hash.toString(16).padStart(8, '0');
}

/**
 * namespace, key and token for complete/fail: what the user typed, and for
 * whatever was left empty, the accepted reserve answer upstream.
 */
function reservationOf(
	this: IExecuteFunctions,
	itemIndex: number,
	item: INodeExecutionData,
): IDataObject {
	const namespace = identity.call(this, 'namespace', itemIndex);
	const key = identity.call(this, 'key', itemIndex);
	let token = text(this.getNodeParameter('token', itemIndex, ''));
	if (namespace !== '' && key !== '' && token !== '') {
		return { namespace, key, token };
	}
	const reserved = findReservation.call(this, itemIndex, item, namespace, key);
	if (reserved === undefined) {
		const which = namespace !== '' || key !== '' ? ` for ${namespace || '*'}/${key || '*'}` : '';
		throw new NodeOperationError(this.getNode(), `No accepted reservation upstream${which}`, {
			itemIndex,
			description:
				'Complete and Fail need the token of an accepted Reserve. Connect this node after the Proceed output of an n8n-guard Reserve node, or fill in Namespace, Key and Token.',
		});
	}
	token = token || text(reserved.token);
	return {
		namespace: namespace || text(reserved.namespace),
		key: key || text(reserved.key),
		token,
	};
}

/**
 * Finds the accepted reserve answer that this item descends from: the item
 * itself, else the paired item of the nearest n8n-guard node upstream.
 */
function findReservation(
	this: IExecuteFunctions,
	itemIndex: number,
	item: INodeExecutionData,
	namespace: string,
	key: string,
): IDataObject | undefined {
	const matches = (json: unknown): json is IDataObject =>
		isObject(json) &&
		json.outcome === 'accepted' &&
		typeof json.token === 'string' &&
		json.token !== '' &&
		(namespace === '' || json.namespace === namespace) &&
		(key === '' || json.key === key.trim());

	if (matches(item.json)) return item.json;

	const self = this.getNode();
	const guards = this.getParentNodes(self.name).filter(
		(parent) => !parent.disabled && parent.type.split('.').pop() === self.type.split('.').pop(),
	);
	if (guards.length === 0) return undefined;
	const proxy = this.getWorkflowDataProxy(itemIndex);
	for (const guard of guards) {
		let json: unknown;
		try {
			json = (proxy.$(guard.name) as { item?: INodeExecutionData }).item?.json;
		} catch {
			continue; // that node did not produce this item (another branch, or not run)
		}
		if (matches(json)) return json;
	}
	return undefined;
}

function parseJson(
	this: IExecuteFunctions,
	value: unknown,
	name: string,
	itemIndex: number,
): unknown {
	if (typeof value !== 'string') return value;
	if (value.trim() === '') return {};
	try {
		return JSON.parse(value) as unknown;
	} catch {
		throw new NodeOperationError(this.getNode(), `${name} is not valid JSON`, { itemIndex });
	}
}

/**
 * Namespace or key as typed or computed. An expression that yields an object
 * would otherwise become "[object Object]": one key for every event.
 */
function identity(this: IExecuteFunctions, name: 'namespace' | 'key', itemIndex: number): string {
	const value = this.getNodeParameter(name, itemIndex, '') as unknown;
	if (value === undefined || value === null) return '';
	if (typeof value === 'string') return value;
	if (typeof value === 'number' || typeof value === 'bigint') return String(value);
	throw new NodeOperationError(this.getNode(), `The ${name} must be text, not ${Array.isArray(value) ? 'a list' : typeof value}`, {
		itemIndex,
		description: `Point the ${name} expression at one value, such as {{ $json.body.event_id }}.`,
	});
}

/** The guard's limit on a reserve's summary, in characters. */
const MAX_SUMMARY_CHARS = 200;

/**
 * A summary as the guard takes it: one line (line breaks, tabs and other
 * control characters, which the guard refuses, become one space), trimmed,
 * and cut to max characters, so text built from an item never costs the
 * write.
 */
function oneLine(value: string, max: number): string {
	// eslint-disable-next-line no-control-regex
	const line = value.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
	return Array.from(line).slice(0, max).join('').trim();
}

function text(value: unknown): string {
	if (value === undefined || value === null) return '';
	return typeof value === 'string' ? value : String(value);
}

import type {
	IDataObject,
	IExecuteFunctions,
	IHttpRequestMethods,
	IHttpRequestOptions,
	IN8nHttpFullResponse,
	JsonObject,
} from 'n8n-workflow';
import { NodeApiError } from 'n8n-workflow';

export const CREDENTIAL_TYPE = 'n8nGuardApi';

// What a person can do about each problem code of the wire contract.
const HINTS: Record<string, string> = {
	invalid_key:
		'Use the stable ID of the event (a source event ID or a booking number): 1–255 bytes, no control characters, never an e-mail address.',
	key_reused:
		'This key was reserved before with a different payload. A key must name exactly one event; a changed event needs a new key.',
	stale_token:
		'The token belongs to an older attempt of this key: another attempt has taken over, so this one must not write or report again.',
	not_found: 'n8n-guard has no record of this key: reserve it first.',
	unauthorized: 'Check the token of the n8n-guard credential.',
	payload_too_large: 'Send a smaller payload or result, or send a fingerprint instead of the payload.',
	store_unavailable: 'n8n-guard cannot reach its store right now: try again later.',
	approval_required:
		'This namespace requires a person\'s approval before writing, and the execution must wait for it: in the Reserve node add Options → Park When Paused (Resume URL), keep its default {{ $execution.resumeUrl }}, and connect the Parked output to a Wait node (Resume: On Webhook Call, Header Auth with n8n-guard\'s resume secret) whose output goes back to the Reserve node. Add Options → Payload as well (the event, named by the trigger): the approval is of that content.',
};

/**
 * Sends one request to n8n-guard and returns its JSON answer.
 *
 * HTTP status errors are not thrown by the helper (ignoreHttpStatusErrors):
 * the problem+json body is turned into a NodeApiError here, so the guard's
 * `code` and `detail` reach the user instead of a generic "400 Bad Request".
 */
export async function guardRequest(
	this: IExecuteFunctions,
	itemIndex: number,
	method: IHttpRequestMethods,
	path: string,
	request: { body?: IDataObject; qs?: IDataObject },
): Promise<IDataObject> {
	const credentials = await this.getCredentials<{ baseUrl: string }>(CREDENTIAL_TYPE, itemIndex);
	const baseURL = String(credentials.baseUrl ?? '').replace(/\/+$/, '');
	const options: IHttpRequestOptions = {
		method,
		baseURL,
		url: path,
		json: true,
		returnFullResponse: true,
		ignoreHttpStatusErrors: true,
	};
	if (request.body !== undefined) options.body = request.body;
	if (request.qs !== undefined) options.qs = request.qs;

	let response: IN8nHttpFullResponse;
	try {
		response = (await this.helpers.httpRequestWithAuthentication.call(
			this,
			CREDENTIAL_TYPE,
			options,
		)) as IN8nHttpFullResponse;
	} catch (error) {
		// Transport failure: no answer at all. For a reserve the request may
		// still have arrived, which is why the key then answers in_progress.
		// n8n has usually wrapped it already (a NodeApiError is returned as is
		// when wrapped again), so build a fresh one that names n8n-guard.
		const cause = error as JsonObject;
		const reason = [cause.message, cause.description].filter((p) => typeof p === 'string' && p);
		throw new NodeApiError(this.getNode(), { message: reason.join(': ') || String(error) }, {
			itemIndex,
			message: `n8n-guard is not reachable at ${baseURL}`,
			description: reason.join(': ') || String(error),
		});
	}

	const body = parseBody(response.body);
	const status = Number(response.statusCode);
	if (status >= 200 && status < 300 && isObject(body)) {
		return body;
	}
	throw problemError.call(this, itemIndex, status, body);
}

function problemError(
	this: IExecuteFunctions,
	itemIndex: number,
	status: number,
	body: unknown,
): NodeApiError {
	const problem: IDataObject = isObject(body)
		? body
		: { detail: typeof body === 'string' ? body.slice(0, 500) : '' };
	const code = typeof problem.code === 'string' ? problem.code : `http_${status}`;
	const title = typeof problem.title === 'string' && problem.title ? problem.title : 'Request failed';
	const detail = typeof problem.detail === 'string' ? problem.detail : '';
	const parts = [detail, formatFields(problem.fields), HINTS[code] ?? '']
		.filter((p) => p !== '')
		.map((p) => (/[.!?]$/.test(p) ? p : `${p}.`));
	if (status >= 200 && status < 300) {
		parts.unshift('n8n-guard answered with something that is not a JSON object.');
	}
	return new NodeApiError(this.getNode(), problem as JsonObject, {
		itemIndex,
		httpCode: String(status),
		message: `n8n-guard: ${title} (${code})`,
		description: parts.join(' '),
	});
}

function formatFields(fields: unknown): string {
	if (!Array.isArray(fields) || fields.length === 0) return '';
	const list = fields
		.filter(isObject)
		.map((f) => `${String(f.field ?? '?')}: ${String(f.rule ?? 'invalid')}`);
	return list.length ? `Fields: ${list.join(', ')}.` : '';
}

function parseBody(body: unknown): unknown {
	if (typeof body !== 'string') return body;
	try {
		return JSON.parse(body) as unknown;
	} catch {
		return body;
	}
}

export function isObject(value: unknown): value is IDataObject {
	return typeof value === 'object' && value !== null && !Array.isArray(value);
}

import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeApiError, NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

import { nodeProperties, type Operation } from './description';
import { operations, reserveOutput, ReserveOutput } from './operations';

// Reserve branches into three outputs, and a fourth, Parked, when it parks
// (the Resume URL option is set: for a paused destination, and for an event
// that waits for a person's approval); the other operations have one.
const OUTPUTS =
	'={{["complete","fail","lookup","resolve"].includes($parameter.operation) ? [{"type":"main"}] : [{"type":"main","displayName":"Proceed"},{"type":"main","displayName":"Already Done"},{"type":"main","displayName":"Blocked"}].concat($parameter.reserveOptions && $parameter.reserveOptions.resumeUrl !== undefined ? [{"type":"main","displayName":"Parked"}] : [])}}' as const;

export class N8nGuard implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'N8n Guard',
		name: 'n8nGuard',
		icon: { light: 'file:../../icons/n8nGuard.svg', dark: 'file:../../icons/n8nGuard.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{$parameter["operation"]}}',
		description:
			'Reserve an idempotency key before a side effect, then complete or fail it, so duplicates never write twice',
		defaults: {
			name: 'n8n-guard',
		},
		// As an AI tool only the first output reaches the agent, so there the
		// node answers on one output (see execute).
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: OUTPUTS,
		credentials: [
			{
				name: 'n8nGuardApi',
				required: true,
			},
		],
		properties: nodeProperties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as Operation;
		const run = operations[operation];
		if (run === undefined) {
			throw new NodeOperationError(this.getNode(), `Unknown operation "${String(operation)}"`);
		}
		// n8n hands an AI agent only the first output of a tool: routed there, an
		// Already Done or Blocked answer would vanish and the agent would hear
		// nothing. As a tool every answer goes out on one output with its
		// `outcome` and `proceed`.
		const routed = operation === 'reserve' && !isTool(this.getNode().type);
		// As in OUTPUTS: the raw parameter, not its value for an item.
		const reserveOptions = this.getNode().parameters.reserveOptions as IDataObject | undefined;
		const parking = routed && reserveOptions?.resumeUrl !== undefined;
		const outputs: INodeExecutionData[][] = routed ? (parking ? [[], [], [], []] : [[], [], []]) : [[]];
		// Items that failed under "Continue On Fail" must never look like a go-ahead.
		const errorOutput = routed ? ReserveOutput.Blocked : 0;

		for (let i = 0; i < items.length; i++) {
			try {
				const answer = await run.call(this, i, items[i]);
				const output = routed ? reserveOutput(answer, parking) : 0;
				const item: INodeExecutionData = { json: successJson(answer), pairedItem: { item: i } };
				if (items[i].binary !== undefined) item.binary = items[i].binary;
				outputs[output].push(item);
			} catch (caught) {
				const error =
					caught instanceof NodeApiError || caught instanceof NodeOperationError
						? caught
						: new NodeOperationError(this.getNode(), caught as Error, { itemIndex: i });
				if (!this.continueOnFail()) throw error;
				// `error` on the item (not only in json) is how n8n recognises it
				// for "Continue (using error output)".
				outputs[errorOutput].push({ json: errorJson(error), error, pairedItem: { item: i } });
			}
		}
		return outputs;
	}
}

/** n8n runs a node offered to an AI agent under the type name plus "Tool". */
function isTool(type: string): boolean {
	return type.endsWith('Tool');
}

/**
 * The guard's answer as it came. A top-level `error` key would make n8n's
 * "Retry On Fail" repeat the step, so it can never appear on a success item.
 */
function successJson(answer: IDataObject): IDataObject {
	if (!('error' in answer)) return answer;
	const { error, ...rest } = answer;
	return { ...rest, guard_error: error };
}

function errorJson(error: unknown): IDataObject {
	const e = error as IDataObject & { context?: IDataObject; cause?: unknown };
	const json: IDataObject = { error: String(e.message ?? error) };
	if (typeof e.description === 'string' && e.description !== '') json.description = e.description;
	if (typeof e.httpCode === 'string') json.status = Number(e.httpCode);
	const problem = (e as { errorResponse?: IDataObject }).errorResponse;
	if (problem && typeof problem === 'object') {
		if (typeof problem.code === 'string') json.code = problem.code;
		if (typeof problem.detail === 'string') json.detail = problem.detail;
		if (Array.isArray(problem.fields)) json.fields = problem.fields;
	}
	return json;
}

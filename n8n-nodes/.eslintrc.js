/**
 * Classic eslint-plugin-n8n-nodes-base rules (eslint 8), as in the
 * n8n-nodes-starter before it moved to @n8n/node-cli (which needs Node 22).
 *
 * @type {import('eslint').Linter.Config}
 */
module.exports = {
	root: true,
	env: { es6: true, node: true },
	parser: '@typescript-eslint/parser',
	parserOptions: {
		project: ['./tsconfig.json'],
		sourceType: 'module',
		extraFileExtensions: ['.json'],
	},
	ignorePatterns: ['.eslintrc.js', '**/*.js', '**/node_modules/**', '**/dist/**'],
	overrides: [
		{
			files: ['package.json'],
			plugins: ['eslint-plugin-n8n-nodes-base'],
			extends: ['plugin:n8n-nodes-base/community'],
		},
		{
			files: ['./credentials/**/*.ts'],
			plugins: ['eslint-plugin-n8n-nodes-base'],
			extends: ['plugin:n8n-nodes-base/credentials'],
			rules: {
				'n8n-nodes-base/cred-class-field-documentation-url-miscased': 'off',
			},
		},
		{
			files: ['./nodes/**/*.ts'],
			plugins: ['eslint-plugin-n8n-nodes-base'],
			extends: ['plugin:n8n-nodes-base/nodes'],
			rules: {
				// n8n-workflow 1.x names inputs with NodeConnectionTypes.Main.
				'n8n-nodes-base/node-class-description-inputs-wrong-regular-node': 'off',
				// Reserve has three outputs (Proceed / Already Done / Blocked),
				// declared as an expression because the other operations have one.
				'n8n-nodes-base/node-class-description-outputs-wrong': 'off',
			},
		},
	],
};

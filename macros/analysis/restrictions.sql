{#- The restriction catalog: one entry per code. what and fix are in the error dbt run
    raises; why is for `dbt-ivm explain` and the README's table, generated from it. -#}
{% macro ivm_restriction_catalog() %}
  {{ return({
    'IVM001': {
        'what': 'SQL the analyzer cannot parse',
        'why': 'what cannot be read is never guessed: a wrong guess would maintain the table wrongly',
        'fix': 'write the model as SELECT ... FROM ... [JOIN ...] [WHERE ...], with CTEs if you like; move unusual syntax to an upstream model'},
    'IVM002': {
        'what': 'relation that is not a ref() or source() of this model',
        'why': 'changes of a relation that is not declared as an upstream are never read',
        'fix': 'read every upstream through ref() or source() so its changes can be tracked'},
    'IVM003': {
        'what': 'CTE that the query never reads',
        'why': 'the upstreams it reads would be tracked, and their changes applied to rows the query never made from them',
        'fix': 'remove the CTE from the model'},
    'IVM010': {
        'what': 'non-deterministic function',
        'why': 'rows that did not change keep the old value, so the table drifts from its definition',
        'fix': 'a refresh would recompute it for changed rows only; compute it in an upstream model or pass the value as a var'},
    'IVM011': {
        'what': 'window function',
        'why': 'a window value depends on other rows of its partition, which may not have changed',
        'fix': 'partition the window function by a key column the model selects (see IVM070), or move it to a downstream model'},
    'IVM012': {
        'what': 'ORDER BY / LIMIT / OFFSET / SORT BY',
        'why': 'which rows LIMIT keeps depends on all rows, and a table keeps no order',
        'fix': 'remove it: a table has no order, and LIMIT depends on all rows; order in the consumer'},
    'IVM013': {
        'what': 'set operation (UNION / INTERSECT / EXCEPT)',
        'why': 'the rows of one branch cannot be traced to the upstream rows of the other branches',
        'fix': 'split the branches into separate ivm models and union them in a view'},
    'IVM014': {
        'what': 'subquery in SELECT, WHERE, HAVING or a join condition, or a semi/anti join',
        'why': 'its result depends on a whole relation, so any change there may change every row',
        'fix': 'rewrite it as an inner join with an upstream, or precompute it in an upstream model'},
    'IVM015': {
        'what': 'LATERAL VIEW / generator function (explode, stack, ...)',
        'why': 'generated rows have no row key that ties them to their upstream row',
        'fix': 'explode in an upstream model and declare its row key'},
    'IVM016': {
        'what': 'output column whose name starts with __ivm_',
        'why': 'the package keeps its bookkeeping in __ivm_ columns of the table, and the consistency test compares the other columns only',
        'fix': 'rename it (... as another_name); with an ivm upstream, list its columns instead of *, which brings its bookkeeping columns'},
    'IVM017': {
        'what': 'output column name that a Delta table cannot hold (space or one of , ; { } ( ) = tab newline)',
        'why': 'Delta refuses these characters in column names without column mapping, as it does for a table model',
        'fix': 'name the select item (... as total_amount), or store the model as parquet'},
    'IVM020': {
        'what': 'outer join',
        'why': 'a change on one side turns NULL-extended rows into matches and back',
        'fix': 'select a key of the preserved side so the keyed path can recompute its slices (see IVM070), or use an inner join'},
    'IVM021': {
        'what': 'join without an equality between columns (cross, natural or theta join)',
        'why': 'without an equality each changed row must be joined with every row of the other side',
        'fix': 'join on equality of columns (a.x = b.y); extra non-equality conditions may follow with AND'},
    'IVM022': {
        'what': 'self-join: the same upstream or CTE is read more than once',
        'why': 'rows are traced to their upstream rows by one identity per upstream, not per role',
        'fix': 'create a second upstream model (a view over the same table) for the second role'},
    'IVM030': {
        'what': 'upstream without a row key',
        'why': 'the changes in one refresh window are netted per row key',
        'fix': 'declare the row key of the upstream in its YAML'},
    'IVM031': {
        'what': 'upstream without a change feed',
        'why': 'without a change log or a watermark the changes since the last refresh cannot be read',
        'fix': 'declare a change log relation (with unique_key), only unique_key for a Delta table with change data '
            'feed, or an append-only watermark column for the upstream in its YAML'},
    'IVM032': {
        'what': 'declared change log relation does not exist or lacks the change columns',
        'why': "every refresh reads the upstream's changes from it (checked at run time only)",
        'fix': 'create the change log with the upstream columns plus _change_type, _commit_version and _commit_timestamp, or fix its name'},
    'IVM040': {
        'what': 'aggregate or DISTINCT inside a CTE or derived table',
        'why': 'only the groups of the outermost query are kept, as the rows of the table',
        'fix': 'select a key the keyed path can recompute slices by (see IVM070), or make the inner aggregate its own ivm model'},
    'IVM041': {
        'what': 'SELECT * in an aggregate query',
        'why': 'every column of an aggregate table must be a group column or a maintained aggregate',
        'fix': 'list the group columns and the aggregates explicitly'},
    'IVM042': {
        'what': 'select item combines aggregates with columns outside the aggregate calls',
        'why': "a group's aggregates are updated from their deltas; other columns in the same expression have no delta",
        'fix': 'select the group column and the aggregate as separate columns and combine them in a downstream model'},
    'IVM043': {
        'what': 'SELECT DISTINCT over GROUP BY or aggregates',
        'why': 'two groups with equal values would have to share one row',
        'fix': 'remove DISTINCT (groups are already distinct) or apply it in a downstream model'},
    'IVM044': {
        'what': 'GROUP BY ALL, ROLLUP, CUBE or GROUPING SETS',
        'why': 'each input row must belong to exactly one group, named by explicit group expressions',
        'fix': 'list the group expressions; compute rollups in a downstream model from this one'},
    'IVM045': {
        'what': 'aggregate that needs a group recompute in a query without GROUP BY (its only group is the whole input)',
        'why': 'recomputing the only group reads the whole input: a full rebuild on every change',
        'fix': 'add a GROUP BY, or use only count, sum, avg, min and max'},
    'IVM070': {
        'what': 'no key to recompute slices by (the keyed path)',
        'why': 'outer joins, aggregates in CTEs, window functions and semi/anti joins are maintained by deleting and recomputing the '
            'slices of a key that a change touches; the key must be a row-level output column, not from the NULL-supplying side '
            'of an outer join, and a PARTITION BY column of every window function whose rows it passes through (the rows of a '
            'window function joined on its PARTITION BY columns give their partners\' keys too)',
        'fix': "set unique_key in the model's config to such output columns, or select one (for example the key of the "
            'preserved side of the LEFT JOIN, or the PARTITION BY column of the window function)'},
    'IVM071': {
        'what': 'upstream whose changed rows reach every key (no key path)',
        'why': 'its rows meet the key only through an aggregate without GROUP BY, a join without a row-level condition, or a '
            'join of a window function\'s rows without an equality on its PARTITION BY columns, so any change may alter every '
            'slice: recomputing them all is a full rebuild',
        'fix': 'join it on a condition between columns (not aggregate results; a PARTITION BY column of a window function '
            'whose rows it joins), aggregate it by a GROUP BY key, or compute the global value in an upstream model'},
    'IVM050': {
        'what': 'query reads no upstream relation',
        'why': 'there is no upstream whose changes a refresh could apply',
        'fix': 'an ivm model needs at least one ref() or source() in FROM'},
  }) }}
{% endmacro %}

{#- One readable paragraph per problem: code, what, where, how to fix. -#}
{% macro _ivm_format_issues(model_name, issues) %}
  {%- set catalog = dbt_ivm.ivm_restriction_catalog() -%}
  {%- set lines = ["Model '" ~ model_name ~ "' cannot be maintained incrementally (materialized='ivm'):"] -%}
  {%- for i in issues -%}
    {%- set entry = catalog[i.code] -%}
    {%- do lines.append('  ' ~ i.code ~ ' ' ~ entry.what ~ ': ' ~ i.construct ~ ' at ' ~ i.position ~ '.') -%}
    {%- do lines.append('         fix: ' ~ (i.fix if i.get('fix') else entry.fix) ~ '.') -%}
  {%- endfor -%}
  {%- do lines.append("Run `dbt-ivm explain " ~ model_name ~
      "` for the full report, or set ivm_on_unsupported: full_rebuild in the model's config meta (config(meta={'ivm_on_unsupported': "
      "'full_rebuild'}) or YAML config: {meta: {ivm_on_unsupported: full_rebuild}}) to rebuild this model on every run instead.") -%}
  {{ return(lines | join('\n')) }}
{% endmacro %}

{#- Fails while a cdc_incremental model has rejected events (`<model>__cdc_rejected`):
    each row says which event (bronze coordinates) and why. -#}
{% test cdc_no_rejected_events(model) %}
    select *
    from {{ model.incorporate(path={'identifier': model.identifier ~ '__cdc_rejected'}) }}
{% endtest %}
